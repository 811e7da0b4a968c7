/**
 * The base image as customers see it (`GET /v1/api/images/base`): the guest image this platform's
 * VMs run, read from the running image, so it lists what a VM really holds.
 */
export interface BaseImageManifest {
  /** The build's content hash (the guest's /etc/agentvm-image). */
  id: string;
  packages: { name: string; version: string }[];
  size_bytes: number;
  /** When its build began and ended. */
  created_at: string;
  ready_at: string;
}

/** Where the image is: being built or looked for, could not be had (and why), or ready. */
export type BaseImageState =
  /** `since`: when this server began to look for it or build it. */
  | { status: 'building'; since: string }
  | { status: 'failed'; reason: string; since: string }
  | { status: 'ready'; manifest: BaseImageManifest }
  /** This server cannot read it (an API replica without the hosts' image files). */
  | { status: 'unknown'; reason: string };

export type BaseImageSource = () => Promise<BaseImageState>;

/** Where no VM host is attached: there is no image to describe. */
export const noBaseImage: BaseImageSource = async () => ({ status: 'unknown', reason: 'no VM host is attached to this server' });
