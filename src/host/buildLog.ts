/**
 * An image build's log (image_build_log), its lines in order: each waits for the ones before it, so
 * the builder may go on while a line is written (`tell`) or wait for it (`say`: a step's output, which
 * holds the step back through its stream's window while the log takes it).
 */
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../log.ts';
import type { ImageFeed } from '../domain/images.ts';
import * as imageStore from '../store/images.ts';

export class BuildLog {
  /** Each image's lines being written (the last one's end). */
  private readonly writing = new Map<string, Promise<void>>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly feed: ImageFeed,
    private readonly log: Logger,
  ) {}

  /** Writes a line of the image's log after the ones before it; resolves once it is written. */
  say(imageId: string, text: string): Promise<void> {
    const line = (this.writing.get(imageId) ?? Promise.resolve()).then(async () => {
      await imageStore.appendLog(this.db, imageId, text.slice(0, 4000), this.clock.now());
      await this.feed.publish({ image_id: imageId }).catch(() => undefined);
    });
    const settled = line.catch(() => undefined);
    this.writing.set(imageId, settled);
    void settled.then(() => this.writing.get(imageId) === settled && this.writing.delete(imageId));
    return line;
  }

  /** The same, not waited for: the build goes on while it is written (its next `say` waits for it). */
  tell(imageId: string, text: string): void {
    this.say(imageId, text).catch((err: Error) => this.log.warn({ err: err.message, image_id: imageId }, 'a line of an image build log was not written'));
  }
}
