// Generates src/client/api.d.ts (the typed client's types) from the customer OpenAPI document the
// server serves. Run `npm run gen:client` after a change to an operation; test/login.test.ts fails
// while the file is stale.
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import { customerOpenApiDocument } from '../src/api/app.ts';

export const CLIENT_TYPES_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/client/api.d.ts');

/** TypeScript types of every path and schema of the served customer document. */
export async function generateClientTypes(): Promise<string> {
  const ast = await openapiTS(JSON.parse(JSON.stringify(customerOpenApiDocument())));
  return `// Generated from the customer OpenAPI document by \`npm run gen:client\`. Do not edit.\n${astToString(ast)}`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await writeFile(CLIENT_TYPES_PATH, await generateClientTypes());
  console.log(`wrote ${CLIENT_TYPES_PATH}`);
}
