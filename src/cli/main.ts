import { Command, Option } from 'commander';
import { loadConfig } from '../config.ts';
import { startServer } from '../server.ts';
import { adminCommands } from './admin.ts';

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

  program.addCommand(adminCommands());
  try {
    await program.parseAsync(argv);
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
