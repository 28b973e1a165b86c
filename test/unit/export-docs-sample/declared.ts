// Declarations for export-docs.test.ts's own check of what it finds: each named for what it lacks.

/** Documented where it is declared. */
export function documented(): void {}

export function bare(): void {}

/** A class whose public method lacks TSDoc (its private one needs none). */
export class Documented {
  /** Documented. */
  told(): void {}
  bareMethod(): void {
    this.hidden();
  }
  private hidden(): void {}
}
