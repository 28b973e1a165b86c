/**
 * What an approved drop removes, as the reviewer saw it when the call was parked. A drop runs
 * only while its object is still this one: an agent that renamed `customers` to the approved
 * `scratch` gets APPROVAL_STALE, not a dropped customer table.
 */
export interface DropObject {
  type: 'table' | 'view';
  /** The name as created (drops match names without regard to case). */
  name: string;
  /**
   * Its definition in `sqlite_schema`, as a reviewer reads it: shortened past
   * {@link MAX_SHOWN_DEFINITION_BYTES} (ALTER … ADD COLUMN … DEFAULT grows it without bound, and
   * the approval, its events and every listing carry it).
   */
  definition: string;
  /** sha256 of the whole definition: what a drop compares. */
  definitionSha256: string;
  /** Rows it held (tables only). */
  rows?: number;
  /** Its b-tree root page: survives a rename, differs between two tables. */
  rootpage: number;
}

/** The longest definition an approval shows; the digest covers the rest. */
export const MAX_SHOWN_DEFINITION_BYTES = 4096;
