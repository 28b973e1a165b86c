import { openBlobStore } from '../../blobs/blob-stores.ts';
import { blobHoldings } from '../../history/blob-holdings.ts';
import type { ShardOpHandler } from './shard-ops.ts';

/**
 * Shard op `blobHoldings`: what the blob store holds (see `blobHoldings`), as the workers see it.
 * A disaster restore of everything lists the store a worker will restore from, not the one the
 * command's own settings name (BLOB_DIR on a new machine is the worker's to know).
 */
export const blobHoldingsOp: ShardOpHandler = async (_data, ctx) => {
  const store = openBlobStore(ctx.config);
  try {
    return await blobHoldings(store);
  } finally {
    await store.close();
  }
};
