/**
 * `agentvm vms url VM PORT`: the preview URL of a port with a new preview token in it (a link that
 * works in a browser: the server trades the token for a cookie of that host).
 */
import { Command, Option } from 'commander';
import { ClientError } from '../client/client.ts';
import { portUrl } from '../client/previews.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { print, type Out } from './output.ts';

const jsonOpt = () => new Option('--json', 'print JSON (for scripts)');

export function vmsUrl(cmd: Command): void {
  cmd
    .description("a port's preview URL with a new preview token in it (the VM's earlier token stops working)")
    .argument('<vm_id>')
    .argument('<port>')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms url vm_… 3000')
    .action(apiAction(async (id: string, portText: string, o: Out) => {
      const port = Number(portText);
      if (!/^\d{1,5}$/.test(portText)) throw new ClientError('invalid_request', 'port: a TCP port number');
      const r = await portUrl(await customerClient(), id, port);
      print(r, o, () => process.stdout.write(`${r.url}\n`));
    }));
}
