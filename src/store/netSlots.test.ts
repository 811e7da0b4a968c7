// freeNetSlots on the schema the migrations make (embedded PostgreSQL): the lowest free slots of a
// host, next to the answer worked out by hand, for held slots at the edges, in runs, of other hosts,
// of VMs whose disks are gone, and in the standby range.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openDb, type Db } from './db.ts';
import { freeNetSlots } from './vms.ts';
import { STANDBY_SLOTS } from '../vmm/commandLine.ts';

const LAST = STANDBY_SLOTS.first - 1;

describe('freeNetSlots', () => {
  let q: Db;
  before(async () => {
    q = await openDb({ pgliteDir: 'memory://' });
    await q.exec(`INSERT INTO tenants (tenant_id, email) VALUES ('t1', 't1@example.com')`);
    await q.exec(`INSERT INTO hosts (host_id, name, vcpus_total, memory_mib_total, disk_gib_total) VALUES ('h1', 'h1', 8, 16384, 500), ('h2', 'h2', 8, 16384, 500)`);
  });
  after(() => q.close());

  let n = 0;
  /** A VM row of host `host` holding `slot` (its disks removed when `gone`). */
  const hold = (host: string, slot: number, gone = false) =>
    q.query(
      `INSERT INTO vms (vm_id, tenant_id, host_id, plan, cycle, harness, vcpus, memory_mib, disk_gib, status, desired_state, net_slot, disks_removed_at)
       VALUES ($1, 't1', $2, 'starter', 'monthly', 'echo', 1, 1024, 10, 'running', 'running', $3, $4)`,
      [`vm_${n++}`, host, slot, gone ? new Date() : null],
    );
  /** Holds exactly these slots on host h1 (and what else the case adds), then asks for `count`. */
  const free = async (held: number[], count: number, others: Array<[string, number, boolean]> = []) => {
    await q.exec('DELETE FROM vms');
    for (const s of held) await hold('h1', s);
    for (const [host, s, gone] of others) await hold(host, s, gone);
    return freeNetSlots(q, 'h1', count);
  };
  /** The same worked out by counting up from 0. */
  const expected = (held: number[], count: number) => {
    const taken = new Set(held);
    const out: number[] = [];
    for (let s = 0; s <= LAST && out.length < count; s++) if (!taken.has(s)) out.push(s);
    return out;
  };

  test('the lowest free slots, across gaps, as many as asked', async () => {
    const cases: Array<[number[], number]> = [
      [[], 1],
      [[], 5],
      [[0], 1],
      [[0, 1, 2], 3],
      [[1, 3, 5], 4],
      [[0, 2, 3, 4, 9], 6],
      [[5, 6, 7], 10],
    ];
    for (const [held, count] of cases) assert.deepEqual(await free(held, count), expected(held, count), `held ${held}, ${count} asked`);
  });

  test('random holdings match counting up', async () => {
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 20; i++) {
      const held = [...new Set(Array.from({ length: rand(40) }, () => rand(60)))];
      const count = 1 + rand(8);
      assert.deepEqual(await free(held, count), expected(held, count), `held ${held}, ${count} asked`);
    }
  });

  test('other hosts, VMs whose disks are gone and the standby range hold nothing here; the top of the range ends it', async () => {
    assert.deepEqual(await free([0], 2, [['h2', 1, false], ['h1', 1, true], ['h1', STANDBY_SLOTS.first, false]]), [1, 2]);
    const top = [LAST - 2, LAST];
    assert.deepEqual(await free(top, 3, []).then((s) => s.slice(0, 3)), [0, 1, 2]);
    // With every slot but two near the top held, only those two come back.
    await q.exec('DELETE FROM vms');
    await q.exec(
      `INSERT INTO vms (vm_id, tenant_id, host_id, plan, cycle, harness, vcpus, memory_mib, disk_gib, status, desired_state, net_slot)
       SELECT 'vm_all_' || s, 't1', 'h1', 'starter', 'monthly', 'echo', 1, 1024, 10, 'running', 'running', s FROM generate_series(0, ${LAST}) AS s WHERE s NOT IN (${LAST - 3}, ${LAST - 1})`,
    );
    assert.deepEqual(await freeNetSlots(q, 'h1', 5), [LAST - 3, LAST - 1]);
    await hold('h1', LAST - 3);
    await hold('h1', LAST - 1);
    assert.deepEqual(await freeNetSlots(q, 'h1', 1), []);
  });
});
