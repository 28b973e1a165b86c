import fs from 'node:fs';

/** Database files this process has seen exist, by path; bounded by clearing when full. */
const made = new Set<string>();
const MAX_MADE = 4096;

/**
 * Whether the database file `file` exists, asked of the file system until it has once: a write
 * that would create a database has the workspace's database quota checked first (`runCall`),
 * and every write asked the file system again, one `access` a write in the worker (issue 31,
 * session 34). agentdb never deletes a database file (an agent removed keeps its data; a restore
 * renames the restored file over it), so one seen stays; a file deleted by hand while the
 * service runs is written again without the count checked, as the child's open handle would
 * have gone on writing into it unseen anyway.
 */
export function databaseMade(file: string): boolean {
  if (made.has(file)) return true;
  if (!fs.existsSync(file)) return false;
  if (made.size >= MAX_MADE) made.clear();
  made.add(file);
  return true;
}
