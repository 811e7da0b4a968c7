// The standby pool's warm-up gives way to starts: paused (QMP stop) while the host is busy, on again
// (cont) once it is quiet, and its time limit counts only the time it ran; a warm-up run that fails
// makes no standby. The guest here is a test double on a Unix socket (an agent that answers and
// "runs" the warm-up's echo run for 800 ms of unpaused time, its clean-up at once, and answers the
// warm-up's process as an older guest would, with a terminal); the real guest's
// warm-up is tested in test/vm-real.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectAgent } from './channel.ts';
import { StandbyPool, type StandbyShape } from './standby.ts';
import type { Machine } from './machine.ts';
import type { Image } from '../image/build.ts';

const RUN_MS = 800;

/**
 * A guest agent that runs the warm-up's first run for RUN_MS of the time it is not paused, and the
 * others at once; each ends with `exitCode`.
 */
function fakeGuest(exitCode = 0) {
  let paused = false;
  let ranMs = 0;
  let last = performance.now();
  let started: () => void = () => undefined;
  const runStarted = new Promise<void>((r) => (started = r));
  const runs: string[][] = [];
  const end = (c: net.Socket, runId: string) =>
    c.write(`${JSON.stringify({ event: 'run_end', run_id: runId, last_seq: 0, end: { exit_code: exitCode, signal: null } })}\n`);
  const tick = () => {
    const now = performance.now();
    if (!paused) ranMs += now - last;
    last = now;
  };
  const server = net.createServer((c) => {
    let buf = '';
    c.on('data', (d) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const msg = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        c.write(`${JSON.stringify({ id: msg.id, ok: true, result: {} })}\n`);
        if (msg.op === 'run_start') {
          runs.push(msg.args.argv);
          if (runs.length > 1) {
            end(c, msg.args.run_id);
            continue;
          }
          ranMs = 0;
          last = performance.now();
          started();
          const timer = setInterval(() => {
            tick();
            if (ranMs < RUN_MS) return;
            clearInterval(timer);
            end(c, msg.args.run_id);
          }, 10);
        }
      }
    });
  });
  return {
    server,
    runStarted,
    runs,
    setPaused(p: boolean) {
      tick();
      paused = p;
    },
  };
}

/** A pool whose standby's machine is the fake guest's (its QMP commands recorded). */
function poolOn(dir: string, guest: ReturnType<typeof fakeGuest>, quiet: () => boolean, log?: (msg: string) => void, imageStandbys = 0) {
  const commands: Array<{ command: string; at: number }> = [];
  const machine = { killed: false };
  const pool = new StandbyPool({
    vmsDir: dir,
    hasSnapshot: async () => true,
    slotsInUse: async () => new Set(),
    quiet,
    // The host's cores are idle for this pool whatever else the machine runs meanwhile (other test files).
    idleCores: async () => os.availableParallelism(),
    log,
    imageStandbys,
    launch: async () => {
      const agent = await connectAgent(path.join(dir, 'agent.sock'));
      const m = {
        pid: 0,
        agent,
        // Its data port: the double answers shell_open as a guest too old to start a process itself.
        data: { stream: () => ({ id: 1, on: () => undefined, consumed: () => undefined, release: () => undefined, abort: () => undefined }) },
        exit: new Promise<string>(() => undefined),
        qmp: async (command: string) => {
          commands.push({ command, at: performance.now() });
          if (command === 'stop') guest.setPaused(true);
          if (command === 'cont') guest.setPaused(false);
          return {};
        },
        kill: async () => {
          machine.killed = true;
          agent.close();
        },
      } as unknown as Machine;
      return { m, phases: {} };
    },
  });
  return { pool, commands, machine };
}

const shape = { image: { id: 'img' } as Image, vcpus: 1, memoryMib: 1024, diskGib: 10 } satisfies StandbyShape;

describe('standby warm-up', () => {
  test('pauses while the host is busy and goes on once it is quiet', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'standby-test-'));
    const guest = fakeGuest();
    await new Promise<void>((r) => guest.server.listen(path.join(dir, 'agent.sock'), r));
    let quiet = true;
    const { pool, commands, machine } = poolOn(dir, guest, () => quiet);
    try {
      pool.keep(shape, 1);
      // The warm-up has begun (the guest was asked to run it); a start begins 200 ms later.
      await guest.runStarted;
      await sleep(200);
      assert.equal(pool.count, 0, 'the warm-up takes 800 ms');
      quiet = false;
      const busyAt = performance.now();
      pool.busy();
      await sleep(50);
      assert.equal(commands.at(-1)?.command, 'stop', 'paused at once');
      assert.ok(commands.at(-1)!.at - busyAt < 50);
      await sleep(1500);
      assert.equal(pool.count, 0, 'a paused warm-up does not end');
      assert.equal(commands.length, 1, 'nothing else was asked meanwhile');
      quiet = true;
      for (let i = 0; i < 1500 && pool.count === 0; i++) await sleep(20);
      assert.equal(pool.count, 1, 'the warm-up ended once the host was quiet');
      assert.deepEqual(
        commands.map((c) => c.command),
        ['stop', 'cont'],
      );
      assert.deepEqual(guest.runs, [
        ['agentvm-echo', '--', 'warm-up'],
        ['sh', '-c', 'rm -f -- "$@" 2>/dev/null; sync', 'sh', '/persist/home/.agentvm-echo-count', '/var/lib/agentvm-echo/count'],
      ]);
      const s = pool.take('img/1/1024/10')!;
      assert.ok(s.phases.paused_ms >= 1400, `paused ${s.phases.paused_ms} ms`);
      assert.ok(s.phases.warm_ms >= RUN_MS - 50 && s.phases.warm_ms < RUN_MS + 600, `warmed ${s.phases.warm_ms} ms`);
      assert.equal(pool.count, 0, 'taken: no longer the pool\'s');
      await pool.close();
      assert.equal(machine.killed, false, 'a standby taken is its taker\'s: closing the pool leaves it running');
      await s.m.kill();
    } finally {
      await pool.close();
      guest.server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('closing the pool ends the standbys it holds', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'standby-test-'));
    const guest = fakeGuest();
    await new Promise<void>((r) => guest.server.listen(path.join(dir, 'agent.sock'), r));
    const { pool, machine } = poolOn(dir, guest, () => true);
    try {
      pool.keep(shape, 1);
      for (let i = 0; i < 1500 && pool.count === 0; i++) await sleep(20);
      assert.equal(pool.count, 1);
      assert.equal(machine.killed, false);
      await pool.close();
      assert.equal(pool.count, 0);
      assert.ok(machine.killed, 'its machine was ended');
    } finally {
      await pool.close();
      guest.server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("images of one's own: the last started get a standby (warmed though the image's user fails the echo run), ended once its layer is gone", { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'standby-test-'));
    const guest = fakeGuest(1);
    await new Promise<void>((r) => guest.server.listen(path.join(dir, 'agent.sock'), r));
    const [a, b] = [path.join(dir, 'a.qcow2'), path.join(dir, 'b.qcow2')];
    await writeFile(a, '');
    await writeFile(b, '');
    const { pool } = poolOn(dir, guest, () => true, undefined, 1);
    const until = async (what: string, ok: () => boolean) => {
      for (let i = 0; i < 1500 && !ok(); i++) await sleep(20);
      assert.ok(ok(), what);
    };
    try {
      pool.noteStart({ ...shape, upperBacking: a, persistBacking: 'a template' });
      pool.noteStart(shape);
      await sleep(300);
      assert.equal(pool.count, 0, 'a VM from a template, or of the base image, asks for none');
      pool.noteStart({ ...shape, upperBacking: a });
      await until('a standby of image a', () => pool.has(`img/1/1024/10/${a}`));
      assert.equal(pool.imageCount, 1);
      assert.ok(!pool.has('img/1/1024/10'), 'it is not one of the base image');
      // One image kept: the next one started takes its place.
      pool.noteStart({ ...shape, upperBacking: b });
      await until('a standby of image b', () => pool.has(`img/1/1024/10/${b}`));
      assert.ok(!pool.has(`img/1/1024/10/${a}`));
      assert.equal(pool.count, 1);
      await rm(b);
      pool.keep(null, 0);
      assert.equal(pool.count, 0, 'its layer is gone: so is its standby');
    } finally {
      await pool.close();
      guest.server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a warm-up run that fails makes no standby, and its machine is ended', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'standby-test-'));
    const guest = fakeGuest(1);
    await new Promise<void>((r) => guest.server.listen(path.join(dir, 'agent.sock'), r));
    const failures: string[] = [];
    const { pool, machine } = poolOn(dir, guest, () => true, (msg) => failures.push(msg));
    try {
      pool.keep(shape, 1);
      for (let i = 0; i < 1500 && failures.length === 0; i++) await sleep(20);
      assert.deepEqual(failures, ['making a standby VM failed']);
      assert.equal(pool.count, 0);
      assert.ok(machine.killed);
    } finally {
      await pool.close();
      guest.server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
