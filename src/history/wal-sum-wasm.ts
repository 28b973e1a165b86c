/**
 * SQLite's WAL frame checksum in WebAssembly, over frames read straight into the module's own
 * memory. A restore checks every frame it reads: 100 MB of frames is 13 million word pairs, and
 * the sum in plain JavaScript (typed-array reads with bounds checks, and a loop V8 optimises only
 * once it is hot: a restore's single pass ran it cold for much of its frames) took 30–50 ms of
 * planning a restore over them where this takes ~20. Own code: no library sums WAL frames; the
 * module is 143 bytes, built below from its instructions, and pinned by the tests against files
 * SQLite wrote.
 *
 * The module, in the text format:
 *
 *     (module
 *       (memory (export "mem") 1)
 *       ;; Sums the frame at `p`: its first 8 header bytes, then `pageSize` bytes from p+24,
 *       ;; continuing from (a, b); the result goes to memory[0..8).
 *       (func (export "sum") (param $p i32) (param $pageSize i32) (param $a i32) (param $b i32)
 *         (local $end i32)
 *         a = a + load(p) + b;  b = b + load(p+4) + a
 *         p = p + 24;  end = p + pageSize
 *         (loop  a = a + load(p) + b;  b = b + load(p+4) + a;  p = p + 8;  br_if (p <u end))
 *         store(0, a);  store(4, b)))
 *
 * WebAssembly loads are little-endian: only a WAL whose magic says little-endian words (what
 * SQLite writes on every common host) is summed here; `checkFrame` sums the others itself.
 */

/** Where the sum leaves its result, and where frames begin in the module's memory (8-aligned, past it). */
const RESULT_AT = 0;
const FRAMES_AT = 64;
const PAGE = 65536;

interface Module {
  memory: WebAssembly.Memory;
  sum: (p: number, pageSize: number, a: number, b: number) => void;
  /** A view of the result words, made again whenever the memory grows (growing detaches the old). */
  result: Uint32Array;
}

let made: Module | null | undefined;

function module(): Module | undefined {
  if (made === undefined) {
    try {
      const instance = new WebAssembly.Instance(new WebAssembly.Module(moduleBytes()), {});
      const memory = instance.exports.mem as WebAssembly.Memory;
      made = { memory, sum: instance.exports.sum as Module['sum'], result: new Uint32Array(memory.buffer, RESULT_AT, 2) };
    } catch {
      // A Node without WebAssembly (--jitless): the JavaScript sum does it all.
      made = null;
    }
  }
  return made ?? undefined;
}

/**
 * A buffer of `bytes` in the module's memory, for a scan to read frames into, or undefined
 * without WebAssembly. Growing the memory detaches every buffer handed out before: one scan at
 * a time per thread (as `scanBuffer` already requires).
 */
export function wasmFrameBuffer(bytes: number): Buffer | undefined {
  const m = module();
  if (!m) return undefined;
  const need = FRAMES_AT + bytes;
  if (m.memory.buffer.byteLength < need) {
    m.memory.grow(Math.ceil((need - m.memory.buffer.byteLength) / PAGE));
    m.result = new Uint32Array(m.memory.buffer, RESULT_AT, 2);
  }
  return Buffer.from(m.memory.buffer, FRAMES_AT, bytes);
}

/**
 * The sum, when `buf` lies in the module's memory ({@link wasmFrameBuffer}); undefined otherwise
 * (the caller sums it). `sum(p, pageSize, s1, s2)` sums the frame at byte `p` of that memory
 * (`buf.byteOffset` + its offset in `buf`) and leaves the result in `result`, allocating nothing.
 */
export function wasmSums(buf: Buffer): Pick<Module, 'sum' | 'result'> | undefined {
  const m = made;
  return m && buf.buffer === m.memory.buffer ? m : undefined;
}

/** The module's bytes (https://webassembly.github.io/spec/core/binary/), from the instructions above. */
function moduleBytes(): Uint8Array<ArrayBuffer> {
  const I32 = 0x7f;
  const uleb = (n: number): number[] => {
    const out: number[] = [];
    do {
      let byte = n & 0x7f;
      n >>>= 7;
      if (n) byte |= 0x80;
      out.push(byte);
    } while (n);
    return out;
  };
  const section = (id: number, body: number[]) => [id, ...uleb(body.length), ...body];
  const vec = (items: number[][]) => [...uleb(items.length), ...items.flat()];
  const name = (s: string) => [...uleb(s.length), ...Buffer.from(s, 'latin1')];
  // Locals: 0 p, 1 pageSize, 2 a, 3 b, 4 end.
  const get = (i: number) => [0x20, i];
  const set = (i: number) => [0x21, i];
  const tee = (i: number) => [0x22, i];
  const load = (offset: number) => [0x28, 2, ...uleb(offset)];
  const store = (offset: number) => [0x36, 2, ...uleb(offset)];
  const i32 = (n: number) => [0x41, ...uleb(n)]; // small non-negative constants only (their sleb equals their uleb below 64)
  const add = [0x6a];
  const pair = [...get(2), ...get(0), ...load(0), ...add, ...get(3), ...add, ...set(2), ...get(3), ...get(0), ...load(4), ...add, ...get(2), ...add, ...set(3)];
  const body = [
    1,
    1,
    I32, // one local: end
    ...pair,
    ...get(0),
    ...i32(24),
    ...add,
    ...tee(0),
    ...get(1),
    ...add,
    ...set(4),
    0x03,
    0x40, // loop
    ...pair,
    ...get(0),
    ...i32(8),
    ...add,
    ...tee(0),
    ...get(4),
    0x49,
    0x0d,
    0, // p < end (unsigned): again
    0x0b, // end loop
    ...i32(RESULT_AT),
    ...get(2),
    ...store(0),
    ...i32(RESULT_AT),
    ...get(3),
    ...store(4),
    0x0b, // end function
  ];
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    1,
    0,
    0,
    0,
    ...section(1, vec([[0x60, 4, I32, I32, I32, I32, 0]])), // type: (i32 i32 i32 i32) -> ()
    ...section(3, vec([[0]])), // one function of that type
    ...section(5, vec([[0x00, 1]])), // memory: at least one page
    ...section(
      7,
      vec([
        [...name('sum'), 0x00, 0],
        [...name('mem'), 0x02, 0],
      ]),
    ),
    ...section(10, vec([[...uleb(body.length), ...body]])),
  ]);
}
