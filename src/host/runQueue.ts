import { ApiError } from '../domain/errors.ts';

/**
 * Runs on one VM go one at a time, in the order they came, whichever replica sent them: the one
 * queue per VM lives with the VM, on its host. A VM with `maxQueued` runs already waiting behind the
 * one running refuses more (429 with Retry-After).
 */
export class RunQueue {
  private readonly queues = new Map<string, { waiting: number; tail: Promise<unknown> }>();

  constructor(private readonly maxQueued: number) {}

  run<T>(vmId: string, fn: () => Promise<T>): Promise<T> {
    const queue = this.queues.get(vmId) ?? { waiting: 0, tail: Promise.resolve() };
    if (queue.waiting > this.maxQueued) {
      throw new ApiError('rate_limited', `this VM already has ${queue.waiting - 1} runs waiting behind the one running`, 'retry when a run has finished', {
        'Retry-After': '5',
      });
    }
    queue.waiting++;
    this.queues.set(vmId, queue);
    const mine = queue.tail.catch(() => undefined).then(fn);
    queue.tail = mine;
    return mine.finally(() => {
      queue.waiting--;
      if (queue.waiting === 0 && this.queues.get(vmId) === queue) this.queues.delete(vmId);
    });
  }
}
