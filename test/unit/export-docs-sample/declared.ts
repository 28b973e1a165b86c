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

/** An interface: one field told, one bare. */
export interface Shape {
  /** Told. */
  told: string;
  bareField: number;
}

/** A union of object types: a field bare in one member only. */
export type Either =
  | {
      /** Told. */
      kind: 'a';
    }
  | {
      /** Told. */
      kind: 'b';
      bareInOne: string;
    };

/** An interface widened in place: its own fields are checked, Error's (outside the repo) are not. */
export type Widened = Error & Shape & { bareAdded: true };
