import { access, readFile, constants } from 'node:fs/promises';
import path from 'node:path';

export type Accel = 'kvm' | 'tcg';

export interface DriverProbe {
  usable: boolean;
  accel: Accel | null;
  qemu: string | null;
  detail: string;
}

async function findOnPath(binary: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, binary);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return null;
}

/**
 * KVM needs hardware virtualisation (vmx/svm) as well as /dev/kvm: a paravirtualised /dev/kvm (PVM)
 * does not boot stock kernels, so such hosts fall back to TCG emulation.
 */
export function accelFor(cpuinfo: string, kvmAccessible: boolean): { accel: Accel; why: string } {
  const hardware = /^flags\s*:.*\b(vmx|svm)\b/m.test(cpuinfo);
  if (!hardware) return { accel: 'tcg', why: 'the CPU shows no vmx/svm flag' };
  if (!kvmAccessible) return { accel: 'tcg', why: '/dev/kvm is not accessible' };
  return { accel: 'kvm', why: 'hardware virtualisation and /dev/kvm are available' };
}

/** This machine's choice: its /proc/cpuinfo and whether /dev/kvm can be opened read-write. */
export async function chooseAccel(): Promise<{ accel: Accel; why: string }> {
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const kvm = await access('/dev/kvm', constants.R_OK | constants.W_OK).then(
    () => true,
    () => false,
  );
  return accelFor(cpuinfo, kvm);
}

/** Whether this machine can run VMs at all, and how. */
export async function probeDriver(): Promise<DriverProbe> {
  const qemu = await findOnPath('qemu-system-x86_64');
  if (!qemu) return { usable: false, accel: null, qemu: null, detail: 'qemu-system-x86_64 is not installed' };
  const { accel, why } = await chooseAccel();
  return { usable: true, accel, qemu, detail: `${accel}: ${why}` };
}

let cachedKhz: number | undefined;

/** The host CPU's clock in kHz, from /proc/cpuinfo (0 when it says nothing); read once. */
export async function hostTscKhz(): Promise<number> {
  if (cachedKhz !== undefined) return cachedKhz;
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const mhz = Number(/^cpu MHz\s*:\s*([\d.]+)/m.exec(cpuinfo)?.[1] ?? 0);
  cachedKhz = Math.round(mhz * 1000);
  return cachedKhz;
}
