/**
 * agentdb's package root: what an agent runtime imports.
 * @packageDocumentation
 */
export {
  AgentDbClient,
  type AwaitingAnswer,
  type CallAnswer,
  type Decision,
  type FinishedAnswer,
  type PendingAnswer,
  type WaitCounts,
} from './calls/client.ts';
export type { AgentDbClientOptions, CallOptions } from './calls/client-options.ts';
export type { CallInput } from './contracts/call.ts';
export type { Envelope, OkEnvelope, ErrorEnvelope } from './contracts/envelope.ts';
export type { AgentSettingsInput as AgentSettings } from './contracts/settings.ts';
export { toolContracts, TOOL_NAMES, type ToolName, type ToolContract } from './contracts/tools.ts';
export { ERRORS, type ErrorCode, type ErrorBody } from './errors.ts';
export { loadConfig, type Config } from './config.ts';
/** `AgentDbClient.metrics`' class: pass one as the client's `metrics` to count its refusals in a runtime's own registry. */
export { Metrics } from './metrics.ts';
export type { AgentDbEvent, EventsMissed, FeedEvent } from './redis/event-types.ts';
export {
  db,
  type DbCapabilityOptions,
  type DbPolicy,
  type DbPolicyContext,
  type DbTool,
  type DbToolAnswer,
  type DbToolCallOptions,
} from './calls/db-capability.ts';
export type { ApprovalRequiredAnswer } from './calls/db-answers.ts';
