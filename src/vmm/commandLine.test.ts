import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { netOfSlot, ownDiskHotplugArgs, QEMU_SANDBOX, qemuCommandLine, slotOfGuest, STANDBY_SLOTS, type MachineConfig, type MachineStart } from './commandLine.ts';
import { machineFiles } from './machine.ts';

const files = machineFiles('/vms/vm_abc');
const image = { kernel: '/img/vmlinux', initramfs: '/img/initramfs.cpio.gz', rootfs: '/img/rootfs.ext4' };

function line(start: MachineStart, over: Partial<MachineConfig> = {}): string[] {
  return qemuCommandLine({
    spec: { vmId: 'vm_abc', vcpus: 2, memoryMib: 1024, image },
    start,
    files,
    accel: 'tcg',
    tscKhz: 2_500_000,
    ...over,
  });
}

/** The values that follow every occurrence of `flag`. */
function valuesOf(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
}

const cold = line({ mode: 'cold' });
const golden = line({ mode: 'golden', mem: '/snap/mem' });
const clone = line({ mode: 'clone', mem: '/snap/mem' });
const scsiDisks = (args: string[]) => valuesOf(args, '-device').filter((d) => d.startsWith('scsi-hd,'));

describe('the QEMU command line', () => {
  test('golden and clone are the same machine: a clone can load what the golden VM saved', () => {
    assert.deepEqual(valuesOf(clone, '-device'), valuesOf(golden, '-device'));
    assert.deepEqual(valuesOf(clone, '-M'), valuesOf(golden, '-M'));
    assert.deepEqual(valuesOf(clone, '-chardev'), valuesOf(golden, '-chardev'));
    assert.deepEqual(valuesOf(clone, '-netdev'), valuesOf(golden, '-netdev'));
  });

  test('a cold boot is that machine with the VM disks in place from the start', () => {
    const nonDisk = (args: string[]) => valuesOf(args, '-device').filter((d) => !d.startsWith('scsi-hd,'));
    assert.deepEqual(nonDisk(cold), nonDisk(golden));
    assert.deepEqual(scsiDisks(cold).map((d) => /id=(\w+)/.exec(d)?.[1]), ['upper', 'persist']);
    assert.deepEqual(scsiDisks(golden), []);
    assert.deepEqual(scsiDisks(clone), [], 'a clone gets its disks plugged in after it resumes');
  });

  test('the disks a clone plugs in are the devices a cold boot has', () => {
    const asDevice = (a: object) => {
      const { driver, ...rest } = a as Record<string, unknown>;
      return [driver, ...Object.entries(rest).map(([k, v]) => `${k}=${v}`)].join(',');
    };
    assert.deepEqual(ownDiskHotplugArgs().map(asDevice), scsiDisks(cold));
  });

  test('the VM own drives: in a cold boot and a clone, never in the golden VM', () => {
    const ids = (args: string[]) => valuesOf(args, '-drive').map((d) => /^id=(\w+)/.exec(d)?.[1]);
    assert.deepEqual(ids(cold), ['root', 'upper', 'persist']);
    assert.deepEqual(ids(clone), ['root', 'upper', 'persist']);
    assert.deepEqual(ids(golden), ['root']);
    assert.ok(valuesOf(clone, '-drive').some((d) => d.includes(`file=${files.upper},`)));
    assert.ok(valuesOf(clone, '-drive').some((d) => d.includes(`file=${files.persist},`)));
    assert.ok(valuesOf(cold, '-drive')[0].includes('readonly=on'), 'the image root is shared read-only');
  });

  test('guest RAM: in a shared file for the golden VM, a private mapping of it for a clone, plain for a cold boot', () => {
    assert.deepEqual(valuesOf(golden, '-object'), ['memory-backend-file,id=mem,size=1024M,mem-path=/snap/mem,share=on']);
    assert.deepEqual(valuesOf(clone, '-object'), ['memory-backend-file,id=mem,size=1024M,mem-path=/snap/mem,share=off']);
    assert.deepEqual(valuesOf(cold, '-object'), []);
    assert.ok(valuesOf(golden, '-M')[0].endsWith(',memory-backend=mem'));
    assert.ok(!valuesOf(cold, '-M')[0].includes('memory-backend'));
  });

  test('only a clone and a resume wait for incoming state, paused', () => {
    assert.deepEqual(clone.slice(-3), ['-S', '-incoming', 'defer']);
    assert.deepEqual(line({ mode: 'resume', namedRam: true }).slice(-3), ['-S', '-incoming', 'defer']);
    for (const args of [cold, golden]) assert.ok(!args.includes('-incoming') && !args.includes('-S'));
  });

  test("a suspended VM's machine: its disks in place, its RAM its own and named as the suspended machine's was", () => {
    const fromClone = line({ mode: 'resume', namedRam: true });
    const fromCold = line({ mode: 'resume', namedRam: false });
    // The devices a clone had once its disks were plugged in: what its saved state names.
    assert.deepEqual(valuesOf(fromClone, '-device'), valuesOf(cold, '-device'));
    assert.deepEqual(valuesOf(fromClone, '-object'), ['memory-backend-ram,id=mem,size=1024M']);
    assert.ok(valuesOf(fromClone, '-M')[0].endsWith(',memory-backend=mem'));
    assert.deepEqual(valuesOf(fromCold, '-object'), []);
    assert.deepEqual(valuesOf(fromCold, '-M'), valuesOf(cold, '-M'));
    assert.ok(!fromClone.some((a) => a.includes('/snap/mem')), 'no golden snapshot needed');
  });

  test('a saved difference resumes over its base memory, mapped copy-on-write', () => {
    const overBase = line({ mode: 'resume', namedRam: true, ramBase: '/vm/ram.base' });
    assert.deepEqual(valuesOf(overBase, '-object'), ['memory-backend-file,id=mem,size=1024M,mem-path=/vm/ram.base,share=off']);
    assert.ok(valuesOf(overBase, '-M')[0].endsWith(',memory-backend=mem'));
    assert.deepEqual(valuesOf(overBase, '-device'), valuesOf(cold, '-device'));
    assert.deepEqual(overBase.slice(-3), ['-S', '-incoming', 'defer']);
  });

  test("a resumed guest's translation cache: 128 MiB like a boot's unless AGENTVM_TCG_TB_MIB says otherwise", () => {
    assert.deepEqual(valuesOf(clone, '-accel'), [`tcg,tb-size=${process.env.AGENTVM_TCG_TB_MIB ?? 128}`]);
    assert.deepEqual(valuesOf(line({ mode: 'resume', namedRam: true }), '-accel'), valuesOf(clone, '-accel'));
    assert.deepEqual(valuesOf(golden, '-accel'), ['tcg,tb-size=128']);
  });

  test('no network card and no process: a guest reaches its gateway on its data port, and QEMU runs in its seccomp sandbox', () => {
    for (const args of [cold, golden, clone, line({ mode: 'resume', namedRam: true })]) {
      assert.deepEqual(valuesOf(args, '-netdev'), []);
      assert.ok(!valuesOf(args, '-device').some((d) => d.startsWith('virtio-net')), args.join(' '));
      assert.deepEqual(valuesOf(args, '-sandbox'), [QEMU_SANDBOX]);
    }
    assert.equal(QEMU_SANDBOX, 'on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny');
  });

  test('the TSC frequency goes to the guest kernel under TCG only', () => {
    assert.equal(valuesOf(cold, '-append')[0], 'console=ttyS0 quiet panic=-1 pci=off reboot=t psi=0 tsc_early_khz=2500000 tsc=reliable');
    assert.deepEqual(valuesOf(cold, '-accel'), ['tcg,tb-size=128']);
    const kvm = line({ mode: 'cold' }, { accel: 'kvm' });
    assert.equal(valuesOf(kvm, '-append')[0], 'console=ttyS0 quiet panic=-1 pci=off reboot=t psi=0');
    assert.deepEqual(valuesOf(kvm, '-accel'), ['kvm']);
    assert.deepEqual(valuesOf(kvm, '-cpu'), ['host,-arch-capabilities']);
  });

  test('every socket, log and pid file is in the machine directory', () => {
    const named = [...valuesOf(cold, '-chardev'), ...valuesOf(cold, '-qmp'), ...valuesOf(cold, '-serial'), ...valuesOf(cold, '-pidfile')];
    const paths = named.map((v) => /(?:path=|unix:|file:|^)(\/[^,]+)/.exec(v)?.[1]);
    assert.equal(paths.length, 6);
    for (const p of paths) assert.ok(p?.startsWith(`${files.dir}/`), String(p));
  });

  test('the shape: memory, vCPUs and the image', () => {
    assert.deepEqual(valuesOf(cold, '-m'), ['1024']);
    assert.deepEqual(valuesOf(cold, '-smp'), ['2']);
    assert.deepEqual(valuesOf(cold, '-kernel'), [image.kernel]);
    assert.deepEqual(valuesOf(cold, '-initrd'), [image.initramfs]);
    assert.deepEqual(valuesOf(cold, '-name'), ['vm_abc']);
  });
});

describe('netOfSlot', () => {
  test('the first, a boundary and the last slot', () => {
    assert.deepEqual(netOfSlot(0), { net: '10.128.0.0/24', guest: '10.128.0.15', gateway: '10.128.0.2', dns: '10.128.0.3', egress: '10.128.0.4' });
    assert.equal(netOfSlot(255).net, '10.128.255.0/24');
    assert.equal(netOfSlot(256).net, '10.129.0.0/24');
    assert.equal(netOfSlot(0x7fff).net, '10.255.255.0/24');
  });

  test('a slot outside 0..0x7fff, or not an integer, is refused', () => {
    for (const slot of [-1, 0x8000, 1.5, Number.NaN, Infinity]) assert.throws(() => netOfSlot(slot), /out of range/, String(slot));
  });

  test("a guest's address names its slot again; the standby range is 10.224.0.0/11", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 0x7fff }), (slot) => assert.equal(slotOfGuest(netOfSlot(slot).guest), slot)));
    for (const ip of [null, '10.128.0.16', '10.127.0.15', '192.168.1.15', '10.128.256.15']) assert.equal(slotOfGuest(ip), undefined, String(ip));
    assert.equal(netOfSlot(STANDBY_SLOTS.first).net, '10.224.0.0/24');
    assert.equal(STANDBY_SLOTS.last, 0x7fff);
  });

  test('distinct slots get distinct networks, and the guest, gateway and DNS are inside their own', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0x7fff }), fc.integer({ min: 0, max: 0x7fff }), (a, b) => {
        const na = netOfSlot(a);
        if (a !== b) assert.notEqual(na.net, netOfSlot(b).net);
        const prefix = na.net.replace(/\.0\/24$/, '.');
        for (const ip of [na.guest, na.gateway, na.dns, na.egress]) assert.ok(ip.startsWith(prefix));
        assert.equal(new Set([na.guest, na.gateway, na.dns, na.egress]).size, 4);
        assert.match(na.net, /^10\.(1[2-9]\d|2[0-5]\d)\.\d{1,3}\.0\/24$/);
      }),
      { numRuns: 500 },
    );
  });
});
