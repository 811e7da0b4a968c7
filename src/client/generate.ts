import path from 'node:path';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import { customerOpenApiDocument } from '../api/app.ts';

export const CLIENT_TYPES_PATH = path.join(path.dirname(fileURLToPath(import.meta.url)), 'api.d.ts');

/** TypeScript types of every path and schema of the served customer document. */
export async function generateClientTypes(): Promise<string> {
  const doc = customerOpenApiDocument();
  const ast = await openapiTS(JSON.parse(JSON.stringify(doc)));
  return `// Generated from the customer OpenAPI document by \`npm run gen:client\`. Do not edit.\n${astToString(ast)}`;
}
