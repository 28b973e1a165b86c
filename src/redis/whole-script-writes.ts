import { Command, type Redis } from 'ioredis';

/**
 * A command's RESP when an argument is a Buffer (BullMQ's msgpack-packed ones), built in one
 * allocation with one write per run of text between Buffers. ioredis's own (`Command.toWritable`
 * in buffer mode) measures and writes every argument's header and text as a piece of its own,
 * each `Buffer.byteLength`ed twice: the caller's admitted add (27 arguments, two of them packed)
 * took 12.7 µs to encode against 2.7 for the same arguments all text (issue 31; on every call's
 * path before its script is sent). The bytes are ioredis's, to the byte (whole-script-writes test).
 */
export function mixedCommandBytes(name: string, args: readonly (string | Buffer)[]): Buffer {
  const parts: (string | Buffer)[] = [];
  let text = `*${args.length + 1}\r\n$${Buffer.byteLength(name)}\r\n${name}\r\n`;
  for (const arg of args) {
    if (typeof arg === 'string') text += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
    else if (arg.length === 0) text += '$0\r\n\r\n';
    else {
      parts.push(`${text}$${arg.length}\r\n`, arg);
      text = '\r\n';
    }
  }
  parts.push(text);
  const sizes = parts.map((p) => (typeof p === 'string' ? Buffer.byteLength(p) : p.length));
  const out = Buffer.allocUnsafe(sizes.reduce((a, b) => a + b, 0));
  let at = 0;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (typeof p === 'string') out.write(p, at, sizes[i], 'utf8');
    else p.copy(out, at);
    at += sizes[i]!;
  }
  return out;
}

/** What this reads of ioredis's `Script` (ioredis 5, which package.json pins): its command class, text and sha. */
interface ScriptParts {
  Command: typeof Command;
  lua: string;
  sha: string;
}

/** Scripts whose command class is already {@link writeScriptWhole}'s. */
const whole = new WeakSet<object>();

/**
 * Has the script `name` defined on `redis` (`defineCommand`) write its commands with
 * {@link mixedCommandBytes}. Its command class is ioredis's own `CustomScriptCommand` otherwise:
 * EVAL with the text the first time on a socket, EVALSHA after, EVAL again once Redis answered
 * NOSCRIPT (ioredis's `Script.execute` sends the command again, of this class). A connection
 * whose ioredis keeps its scripts otherwise is left as it is, ioredis's writes and all.
 */
export function writeScriptWhole(redis: Redis, name: string): void {
  const script = (redis as unknown as { scriptsSet?: Record<string, Partial<ScriptParts>> }).scriptsSet?.[name];
  if (!script || whole.has(script) || typeof script.Command !== 'function' || typeof script.lua !== 'string' || typeof script.sha !== 'string') return;
  const { lua, sha } = script as ScriptParts;
  // The sockets this script's text went to, as ioredis's own class keeps them.
  const loaded = new WeakSet<object>();
  script.Command = class WholeScriptCommand extends Command {
    override toWritable(socket: object): string | Buffer {
      const reject = this.reject;
      this.reject = (err: Error) => {
        if (err.message.includes('NOSCRIPT')) loaded.delete(socket);
        reject.call(this, err);
      };
      if (!loaded.has(socket)) {
        loaded.add(socket);
        this.name = 'eval';
        this.args[0] = lua;
      } else if (this.name === 'eval') {
        this.name = 'evalsha';
        this.args[0] = sha;
      }
      // Set by ioredis before the write when an argument is a Buffer (`stringifyArguments`).
      if (!(this as unknown as { bufferMode?: boolean }).bufferMode) return super.toWritable(socket as never);
      return mixedCommandBytes(this.name, this.args as (string | Buffer)[]);
    }
  };
  whole.add(script);
}
