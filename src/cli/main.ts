import { Command, Option } from 'commander';
import { loadConfig } from '../config.ts';
import { startServer } from '../server.ts';
import { adminCommands } from './admin.ts';
import { customerCommands } from './customer.ts';
import { bashCompletion } from './completion.ts';
import { createMcpServer } from '../mcp/server.ts';
import { apiClient, resolveCredentials } from '../client/client.ts';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { buildImage } from '../image/build.ts';
import path from 'node:path';

export async function main(argv: string[]): Promise<void> {
  const program = new Command('agentvm')
    .description('agentvm: an isolated microVM for every AI coding agent')
    .showHelpAfterError();

  program
    .command('serve')
    .description('run the platform: API, reconcilers and the local VM driver')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--port <port>', 'port to listen on').env('PORT').default('8080'))
    .addOption(new Option('--data-dir <dir>', 'where the database, images and disks live').env('AGENTVM_DATA_DIR').default('./.agentvm'))
    .addHelpText('after', '\nExample:\n  npx agentvm serve --port 8080 --data-dir ./.agentvm')
    .action(async (opts: { host: string; port: string; dataDir: string }) => {
      const server = await startServer(loadConfig(opts));
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.once(signal, () => {
          server.close().then(
            () => process.exit(0),
            () => process.exit(1),
          );
        });
      }
    });

  program
    .command('image')
    .description('the guest image every VM boots')
    .command('build')
    .description('build the guest image (kernel, initramfs, Debian root with Node and the guest agent); needs root')
    .addOption(new Option('--image-dir <dir>', 'where images are kept').env('AGENTVM_IMAGE_DIR'))
    .addOption(new Option('--data-dir <dir>', 'data dir (images go under it unless --image-dir)').env('AGENTVM_DATA_DIR').default('./.agentvm'))
    .option('--json', 'print the image manifest as JSON')
    .action(async (opts: { imageDir?: string; dataDir: string; json?: boolean }) => {
      const imageDir = path.resolve(opts.imageDir ?? path.join(opts.dataDir, 'images'));
      const started = Date.now();
      const image = await buildImage(imageDir, (msg) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${msg}\n`));
      if (opts.json) process.stdout.write(`${JSON.stringify({ ...image.manifest, dir: image.dir }, null, 2)}\n`);
      else process.stdout.write(`guest image ${image.id} at ${image.dir} (kernel ${image.manifest.kernel_release})\n`);
    });

  customerCommands(program);
  program.addCommand(adminCommands());
  program
    .command('mcp')
    .description('the MCP server on stdio, for agents and desktop clients (uses your login or AGENTVM_API_KEY)')
    .addHelpText('after', '\nExample (a desktop client\'s config):\n  {"command": "npx", "args": ["agentvm", "mcp"], "env": {"AGENTVM_API_KEY": "avm_live_…"}}')
    .action(async () => {
      const { baseUrl, key } = await resolveCredentials();
      const server = createMcpServer(() => apiClient(baseUrl, key));
      await server.connect(new StdioServerTransport());
    });
  program
    .command('completion')
    .description('print a shell completion script (bash; zsh with bashcompinit)')
    .argument('[shell]', 'bash or zsh', 'bash')
    .addHelpText('after', '\nExample:\n  source <(npx agentvm completion bash)')
    .action((shell: string) => {
      const script = bashCompletion(program);
      process.stdout.write(shell === 'zsh' ? `autoload -U +X bashcompinit && bashcompinit\n${script}` : script);
    });
  try {
    await program.parseAsync(argv);
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
