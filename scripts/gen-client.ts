// Generates src/client/api.d.ts from the customer OpenAPI document the server serves.
// `npm run gen:client` after a change to an operation; test/client.test.ts fails while it is stale.
import { writeFile } from 'node:fs/promises';
import { generateClientTypes, CLIENT_TYPES_PATH } from '../src/client/generate.ts';

await writeFile(CLIENT_TYPES_PATH, await generateClientTypes());
console.log(`wrote ${CLIENT_TYPES_PATH}`);
