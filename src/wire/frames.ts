/**
 * The frames of the data port (DATA_PORT_NAME) and the sizes its streams keep to: a frame is a 9-byte
 * header (stream id u32, type u8, payload length u32, big-endian) and its payload. Used by the host
 * driver and the guest agent alike: Node built-ins only.
 */
export const FRAME = { data: 0, end: 1, credit: 2, abort: 3, control: 4 } as const;
export type FrameType = (typeof FRAME)[keyof typeof FRAME];

/** Bytes a sender may have in flight on one stream before its reader grants more. */
export const STREAM_WINDOW = 2 * 1024 * 1024;
/**
 * The window of a file's stream: under emulation every grant costs the guest wakeups, and a writer
 * out of credit waits a round trip through both sides, so bulk bytes get a wider window (a file's
 * reader on either side only holds it in memory; a shell keeps the narrow one, so that what its
 * program floods out is never far ahead of the terminal).
 */
export const FILE_STREAM_WINDOW = 8 * 1024 * 1024;
/** The narrowest and widest windows a stream may have. */
export const MIN_WINDOW = 512 * 1024;
export const MAX_WINDOW = 64 * 1024 * 1024;
/** The largest data payload of one frame. */
export const MAX_DATA_FRAME = 256 * 1024;
/** The bytes of one frame header. */
export const FRAME_HEADER_BYTES = 9;
/** What a read that bypasses the page cache takes whole: the disk's logical block. */
export const DIRECT_BLOCK = 512;

/** The payload of a whole data frame made by MuxStream.framesFor (`direct`: a whole number of DIRECT_BLOCK). */
export function framePayload(maxData: number, direct: boolean): number {
  const per = maxData - FRAME_HEADER_BYTES;
  return direct ? per - (per % DIRECT_BLOCK) : per;
}

/** Why a stream was cut, as the side that cut it says it. */
export interface StreamFault {
  error: string;
  message: string;
}

export function frameHeader(stream: number, type: FrameType, length: number): Buffer {
  const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  h.writeUInt32BE(stream, 0);
  h.writeUInt8(type, 4);
  h.writeUInt32BE(length, 5);
  return h;
}

export function faultError(f: StreamFault): Error {
  return Object.assign(new Error(f.message), { code: f.error });
}
