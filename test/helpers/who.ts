/** The caller of a parked call (workspace and agent), as `client.result()` needs it. */
export function whoOf(answer: { approval: Record<string, unknown> }): { workspace: string; agent: string } {
  return { workspace: String(answer.approval.workspace), agent: String(answer.approval.agent) };
}
