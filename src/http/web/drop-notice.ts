import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The "Dropped <table>." notice after the drop form's redirect. The table's name rides in that
 * redirect's query, where anyone could write their own text and send a member the link; the
 * notice would then show it in agentdb's own status line. So the redirect also carries a proof,
 * an HMAC of the database and table keyed by the session's CSRF token, which only the session
 * that made the drop can present (the inbox's notices are known words for the same reason).
 */

const proofOf = (csrf: string, db: string, table: string) => createHmac('sha256', csrf).update(`${db}\u0000${table}`).digest('base64url');

/** The query a drop's redirect adds to the database page's URL. */
export function dropNoticeQuery(csrf: string, db: string, table: string): string {
  return `dropped=${encodeURIComponent(table)}&proof=${proofOf(csrf, db, table)}`;
}

/** The dropped table's name when the query's proof is this session's, else undefined. */
export function droppedTable(query: { dropped?: unknown; proof?: unknown }, csrf: string, db: string): string | undefined {
  const { dropped, proof } = query;
  if (typeof dropped !== 'string' || typeof proof !== 'string') return undefined;
  const want = Buffer.from(proofOf(csrf, db, dropped));
  const sent = Buffer.from(proof);
  return sent.length === want.length && timingSafeEqual(sent, want) ? dropped : undefined;
}
