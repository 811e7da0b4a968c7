/**
 * The base image's manifest as the API serves it: read from the image a VM host runs (its
 * manifest.json, written by the build), or on an API replica from the image the live hosts report.
 */
import type { BaseImageManifest, BaseImageSource, BaseImageState } from '../domain/baseImage.ts';
import { loadImage, type Image } from './build.ts';

export function describeImage(image: Image): BaseImageManifest {
  const m = image.manifest;
  return {
    id: image.id,
    packages: m.packages.map((p) => ({ name: p.name, version: p.version })),
    size_bytes: m.size_bytes,
    created_at: new Date(Date.parse(m.built_at) - m.build_ms).toISOString(),
    ready_at: m.built_at,
  };
}

/** A VM host's image, as its promise settles: building (or being looked for), failed, ready. */
export function trackBaseImage(imageReady: Promise<Image>): BaseImageSource {
  const since = new Date().toISOString();
  let state: BaseImageState = { status: 'building', since };
  imageReady.then(
    (image) => (state = { status: 'ready', manifest: describeImage(image) }),
    (err: Error) => (state = { status: 'failed', reason: err.message, since }),
  );
  return async () => state;
}

/**
 * An API replica's view: the image the live VM hosts report (the newest heartbeat's first), read
 * from this server's image dir (AGENTVM_IMAGE_DIR) where the operator shares or copies it.
 */
export function hostsBaseImage(imageDir: string, liveImageIds: () => Promise<string[]>): BaseImageSource {
  return async () => {
    const ids = await liveImageIds();
    if (ids.length === 0) return { status: 'unknown', reason: 'no live VM host has reported its guest image yet' };
    for (const id of ids) {
      const image = await loadImage(imageDir, id);
      if (image) return { status: 'ready', manifest: describeImage(image) };
    }
    return { status: 'unknown', reason: `the VM hosts run guest image ${ids[0]}, which is not in this server's image dir ${imageDir}` };
  };
}
