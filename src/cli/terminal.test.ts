import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeOutcome, EscapeReader } from './terminal.ts';

test('~. after a newline ends the terminal; ~~ is one ~; a ~ elsewhere is typed', () => {
  const feed = (r: EscapeReader, s: string) => {
    const { send, quit } = r.feed(Buffer.from(s));
    return { send: send.toString(), quit };
  };
  assert.deepEqual(feed(new EscapeReader(), '~.'), { send: '', quit: true });
  const r = new EscapeReader();
  assert.deepEqual(feed(r, 'ls ~.'), { send: 'ls ~.', quit: false });
  assert.deepEqual(feed(r, '\r'), { send: '\r', quit: false });
  assert.deepEqual(feed(r, '~'), { send: '', quit: false });
  assert.deepEqual(feed(r, '~'), { send: '~', quit: false });
  assert.deepEqual(feed(r, 'x\r~'), { send: 'x\r', quit: false });
  assert.deepEqual(feed(r, 'a'), { send: '~a', quit: false });
  assert.deepEqual(feed(r, '\n~.rest'), { send: '\n', quit: true });
});

test("the command's exit code follows the shell's end", () => {
  assert.deepEqual(closeOutcome(1000, 'exit 3'), { exit: 3 });
  assert.equal(closeOutcome(1000, 'signal SIGKILL').exit, 137);
  assert.deepEqual(closeOutcome(4409, 'vm_not_running: the VM stopped'), { exit: 8, say: 'vm_not_running: the VM stopped' });
  assert.equal(closeOutcome(1011, 'internal: x').exit, 7);
});
