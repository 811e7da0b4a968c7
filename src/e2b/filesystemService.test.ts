import { test } from 'node:test';
import assert from 'node:assert/strict';
import { changes } from './filesystemService.ts';
import { EventType } from './gen/filesystem_pb.ts';
import type { Entry } from './guestFs.ts';

const entry = (p: string, o: Partial<Entry> = {}): [string, Entry] => [
  p,
  { name: p.split('/').pop()!, path: p, type: 'file', size: 0, mode: 0o644, owner: 'user', group: 'user', mtimeS: 1, symlinkTarget: null, metadata: null, ...o },
];

test("a watch's events between two looks are those inotify gives: a file made and written is a create and a write", () => {
  const before = new Map([entry('/w/kept', { size: 3 }), entry('/w/grown', { size: 1 }), entry('/w/chmod'), entry('/w/gone')]);
  const after = new Map([
    entry('/w/kept', { size: 3 }),
    entry('/w/grown', { size: 2, mtimeS: 2 }),
    entry('/w/chmod', { mode: 0o600 }),
    entry('/w/nested', { type: 'dir', size: 4096 }),
    entry('/w/nested/new.txt', { size: 26 }),
    entry('/w/empty'),
  ]);
  const events = changes(before, after, '/w', false).map((e) => `${EventType[e.type!]} ${e.name}`);
  assert.deepEqual(events.sort(), ['CHMOD chmod', 'CREATE empty', 'CREATE nested', 'CREATE nested/new.txt', 'REMOVE gone', 'WRITE grown', 'WRITE nested/new.txt']);
  // The create comes before the write of the same file.
  const names = changes(before, after, '/w', false).filter((e) => e.name === 'nested/new.txt').map((e) => e.type);
  assert.deepEqual(names, [EventType.CREATE, EventType.WRITE]);
});
