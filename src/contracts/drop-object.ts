/**
 * What an approved drop removes, as the reviewer saw it when the call was parked. A drop runs
 * only while its object is still this one: an agent that renamed `customers` to the approved
 * `scratch` gets APPROVAL_STALE, not a dropped customer table.
 */
export interface DropObject {
  type: 'table' | 'view';
  /** The name as created (drops match names without regard to case). */
  name: string;
  /** Its definition in `sqlite_schema`, as SQLite keeps it. */
  definition: string;
  /** Rows it held (tables only). */
  rows?: number;
  /** Its b-tree root page: survives a rename, differs between two tables. */
  rootpage: number;
}
