import { describe, expect, it } from 'vitest';
import { csvField, csvHeader, csvRecord, neutralised, quoted } from '../../src/sqlite/csv-format.ts';

describe('CSV (RFC 4180)', () => {
  it('quotes a field holding a quote, a comma, CR or LF, doubling inner quotes', () => {
    expect(quoted('plain')).toBe('plain');
    expect(quoted('a,b')).toBe('"a,b"');
    expect(quoted('say "hi"')).toBe('"say ""hi"""');
    expect(quoted('line1\nline2')).toBe('"line1\nline2"');
    expect(quoted('cr\rhere')).toBe('"cr\rhere"');
    expect(quoted(' spaced ')).toBe(' spaced ');
  });

  it('ends records with CRLF and writes NULL as an empty field', () => {
    expect(csvRecord([1n, null, 'x', 2.5])).toBe('1,,x,2.5\r\n');
    expect(csvRecord([])).toBe('\r\n');
  });

  it('keeps 64-bit integers exact and writes blobs as 0x hex', () => {
    expect(csvField(9223372036854775807n)).toBe('9223372036854775807');
    expect(csvField(Buffer.from([0, 255, 16]))).toBe('0x00ff10');
  });

  it('keeps UTF-8 text as it is', () => {
    expect(csvField('ünïcødé ✓ 日本')).toBe('ünïcødé ✓ 日本');
  });
});

describe('formula injection', () => {
  it.each(['=SUM(A1)', '+1', '-2+3', '@cmd', '\tx', '\rx'])('prefixes %j with a quote', (text) => {
    expect(neutralised(text)).toBe(`'${text}`);
  });

  it.each(['  =1+1', '\n=1+1', '\r\n@cmd', ' \t+1', '\u00a0-2', '\n\n=HYPERLINK("x")'])(
    'prefixes %j, whose first non-whitespace character starts a formula',
    (text) => {
      expect(neutralised(text)).toBe(`'${text}`);
      expect(csvField(text).startsWith(text.includes('\n') || text.includes('\r') ? `"'` : `'`)).toBe(true);
    },
  );

  it('leaves other text alone, and numbers (even negative) as numbers', () => {
    expect(neutralised('a=b')).toBe('a=b');
    expect(neutralised("'already")).toBe("'already");
    expect(neutralised('  plain = text')).toBe('  plain = text');
    expect(neutralised('   ')).toBe('   ');
    expect(csvField(-5n)).toBe('-5');
    expect(csvField(-0.5)).toBe('-0.5');
  });

  it('neutralises before quoting, so a quoted formula is still inert', () => {
    expect(csvField('=HYPERLINK("http://x","y")')).toBe(`"'=HYPERLINK(""http://x"",""y"")"`);
    expect(csvField('\r\n=1')).toBe(`"'\r\n=1"`);
  });

  it('neutralises column names in the header too', () => {
    expect(csvHeader(['id', '=cmd', 'a,b'])).toBe(`id,'=cmd,"a,b"\r\n`);
  });
});
