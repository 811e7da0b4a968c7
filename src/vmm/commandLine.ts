/**
 * The QEMU command line of a machine, as a pure function of what the machine is (no I/O): tested on
 * its own, and a snapshot's key (a hash of its golden machine's line) changes only when the machine does.
 *
 * Every VM has the same machine: the image's root as a read-only virtio disk shared by all VMs, and
 * its own two disks on a virtio-scsi controller (the writable layer of its root, its persist disk).
 * That makes one booted guest good for many VMs: a golden VM of a shape is saved once and a clone
 * resumes it with its own disks plugged in after it resumes; a cold boot has them in place.
 *
 * There is no network card: a guest reaches nothing but its egress gateway, whose connections the
 * guest agent carries on the data port (src/vmm/egress.ts). QEMU runs no user-mode network and starts
 * no process: its seccomp sandbox denies it any.
 */
import { AGENT_PORT_NAME, ASSUME_PORT_NAME, DATA_PORT_NAME, PERSIST_MODEL, UPPER_MODEL } from '../wire/protocol.ts';
import type { Image } from '../image/build.ts';
import type { MachineFiles } from './machine.ts';
import type { Accel } from './probe.ts';
import { STANDBY_SLOTS } from '../net/slots.ts';

/** A VM's private network: its /24, the guest's address, QEMU's gateway and DNS, and the egress gateway's address in it. */
export interface GuestNet {
  net: string;
  guest: string;
  gateway: string;
  dns: string;
  egress: string;
}

/** The guest network of slot n: 10.(128 + n/256).(n%256).0/24, the guest at .15, the egress gateway at .4. */
export function netOfSlot(slot: number): GuestNet {
  if (!Number.isInteger(slot) || slot < 0 || slot > 0x7fff) throw new Error(`network slot ${slot} is out of range`);
  const prefix = `10.${128 + (slot >> 8)}.${slot & 255}`;
  return { net: `${prefix}.0/24`, guest: `${prefix}.15`, gateway: `${prefix}.2`, dns: `${prefix}.3`, egress: `${prefix}.4` };
}

/** The network slot whose guest address this is (netOfSlot's inverse), if it is one. */
export function slotOfGuest(ipv4: string | null): number | undefined {
  const m = /^10\.(\d+)\.(\d+)\.15$/.exec(ipv4 ?? '');
  if (!m || Number(m[1]) < 128 || Number(m[1]) > 255 || Number(m[2]) > 255) return undefined;
  return (Number(m[1]) - 128) * 256 + Number(m[2]);
}

/** Network slots of standby VMs (net/slots.ts). */
export { STANDBY_SLOTS };

/**
 * QEMU's own seccomp filter: no obsolete system calls, no change of user or group, no new process (a
 * QEMU that starts one is not ours any more), no change of its scheduling or resources.
 */
export const QEMU_SANDBOX = 'on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny';

/**
 * How a machine starts. `golden`: the machine a snapshot is saved from (RAM in a shared file, no disks
 * of a VM's own); `clone`: resumes that machine with RAM mapped copy-on-write from `mem` and the VM's
 * disks ready to plug in; `cold`: boots the same machine with the disks in place; `resume`: the
 * machine of a suspended VM, its disks in place, waiting for its saved memory and devices. Its RAM is
 * its own (anonymous) and named as the suspended machine's was (`namedRam`: it had started as a clone).
 */
export type MachineStart = { mode: 'cold' } | { mode: 'golden' | 'clone'; mem: string } | { mode: 'resume'; namedRam: boolean; ramBase?: string };

/** What a machine is: a VM's shape (a VmSpec is one) and where it boots from. */
export interface MachineSpec {
  vmId: string;
  vcpus: number;
  memoryMib: number;
  image: Pick<Image, 'kernel' | 'initramfs' | 'rootfs'>;
}

export interface MachineConfig {
  spec: MachineSpec;
  start: MachineStart;
  files: MachineFiles;
  accel: Accel;
  /** The host's TSC frequency: under TCG the guest kernel is told it (without, a boot now and then hangs). */
  tscKhz: number;
}

/** A VM's own disks on the SCSI controller, found in the guest by model. */
const OWN_DISKS = [
  { id: 'upper', drive: 'upper', product: UPPER_MODEL, scsiId: 1 },
  { id: 'persist', drive: 'persist', product: PERSIST_MODEL, scsiId: 2 },
];
type OwnDisk = (typeof OWN_DISKS)[number];

function scsiDevice(d: OwnDisk): string {
  return `scsi-hd,id=${d.id},drive=${d.drive},bus=scsi0.0,scsi-id=${d.scsiId},lun=0,product=${d.product}`;
}

/** QMP `device_add` arguments that plug a clone's own disks in: the devices a cold boot starts with. */
export function ownDiskHotplugArgs(): object[] {
  return OWN_DISKS.map((d) => ({ driver: 'scsi-hd', id: d.id, drive: d.drive, bus: 'scsi0.0', 'scsi-id': d.scsiId, lun: 0, product: d.product }));
}

/**
 * The guest kernel's command line. An idle guest should not wake: no pressure-stall averaging every
 * 2 s (`psi=0`), and under TCG no clocksource watchdog checking the TSC twice a second
 * (`tsc=reliable`: QEMU's TSC there is the host's clock, and each check wakes the guest).
 */
function kernelCommandLine(accel: Accel, tscKhz: number): string {
  return ['console=ttyS0', 'quiet', 'panic=-1', 'pci=off', 'reboot=t', 'psi=0', ...(accel === 'tcg' ? [`tsc_early_khz=${tscKhz}`, 'tsc=reliable'] : [])].join(' ');
}

/** The translation cache of a resumed guest under TCG, in MiB (AGENTVM_TCG_TB_MIB; the density benchmark weighs it). */
const TB_MIB_RESUMED = Math.max(8, Number(process.env.AGENTVM_TCG_TB_MIB ?? 128) || 128);

/** The arguments of `qemu-system-x86_64` for a machine. */
export function qemuCommandLine(m: MachineConfig): string[] {
  const { spec, start, files: f } = m;
  // Under TCG, translated code is private memory of each VM's QEMU, up to its cache size: 128 MiB for a
  // boot; a resumed guest's is AGENTVM_TCG_TB_MIB (128 too unless set: 32 saved little idle memory and
  // cost retranslation under load, measured in the lifecycle benchmark).
  const tbMib = start.mode === 'clone' || start.mode === 'resume' ? TB_MIB_RESUMED : 128;
  const accel = m.accel === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host,-arch-capabilities'] : ['-accel', `tcg,tb-size=${tbMib}`, '-cpu', 'max'];
  const namedRam = start.mode === 'resume' ? start.namedRam || Boolean(start.ramBase) : start.mode !== 'cold';
  // A file's memory mapped copy-on-write: a clone's golden memory, or the base a suspended VM's saved
  // difference loads over (suspend.ts).
  const fileMem = start.mode === 'golden' || start.mode === 'clone' ? start.mem : start.mode === 'resume' ? start.ramBase : undefined;
  const memory = fileMem
    ? ['-object', `memory-backend-file,id=mem,size=${spec.memoryMib}M,mem-path=${fileMem},share=${start.mode === 'golden' ? 'on' : 'off'}`]
    : namedRam ? ['-object', `memory-backend-ram,id=mem,size=${spec.memoryMib}M`] : [];
  const disksInPlace = start.mode === 'cold' || start.mode === 'resume';
  const ownDrives = ['-drive', `id=upper,file=${f.upper},format=qcow2,if=none,cache=unsafe,discard=unmap,detect-zeroes=unmap`,
    '-drive', `id=persist,file=${f.persist},format=qcow2,if=none,cache=writeback,discard=unmap,detect-zeroes=unmap`];
  return [
    '-name', spec.vmId,
    '-M', `microvm,isa-serial=on,rtc=on${namedRam ? ',memory-backend=mem' : ''}`,
    ...accel,
    ...memory,
    '-m', String(spec.memoryMib),
    '-smp', String(spec.vcpus),
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
    '-sandbox', QEMU_SANDBOX,
    '-kernel', spec.image.kernel,
    '-initrd', spec.image.initramfs,
    '-append', kernelCommandLine(m.accel, m.tscKhz),
    '-serial', `file:${f.console}`,
    '-drive', `id=root,file=${spec.image.rootfs},format=raw,if=none,readonly=on,cache=unsafe`,
    '-device', 'virtio-blk-device,drive=root,serial=root',
    '-device', 'virtio-scsi-device,id=scsi0',
    '-device', 'virtio-rng-device',
    '-device', 'virtio-serial-device',
    '-chardev', `socket,id=agent,path=${f.agent},server=on,wait=off`,
    '-device', `virtserialport,chardev=agent,name=${AGENT_PORT_NAME}`,
    '-chardev', `socket,id=assume,path=${f.assume},server=on,wait=off`,
    '-device', `virtserialport,chardev=assume,name=${ASSUME_PORT_NAME}`,
    '-chardev', `socket,id=data,path=${f.data},server=on,wait=off`,
    '-device', `virtserialport,chardev=data,name=${DATA_PORT_NAME}`,
    '-qmp', `unix:${f.qmp},server=on,wait=off`,
    '-pidfile', f.pid,
    ...(disksInPlace ? [...ownDrives, ...OWN_DISKS.flatMap((d) => ['-device', scsiDevice(d)])] : []),
    ...(start.mode === 'clone' ? ownDrives : []),
    ...(start.mode === 'clone' || start.mode === 'resume' ? ['-S', '-incoming', 'defer'] : []),
  ];
}
