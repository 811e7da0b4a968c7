import { startBenchPlatform } from './platform.ts';
const { server, call, untilRunning, close } = await startBenchPlatform('probe', { standbyVms: 1 });
try {
  const driver = server.host.driver!;
  const vm = await call('POST', '/v1/api/vms', { harness: 'echo' });
  await untilRunning(vm.vm_id, performance.now());
  const E = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/persist/home', USER: 'agent', LOGNAME: 'agent', SHELL: '/bin/bash', LANG: 'C.UTF-8' };
  const ex = (argv: string[], env: Record<string, string> = E) => driver.exec(vm.vm_id, { argv, uid: 1000, gid: 1000, env, cwd: '/persist/workspace' }, 30_000);
  async function time(name: string, argv: string[], env?: Record<string, string>) {
    const t: number[] = [];
    for (let i = 0; i < 21; i++) { const t0 = performance.now(); await ex(argv, env); t.push(performance.now() - t0); }
    t.sort((a, b) => a - b);
    console.log(name.padEnd(40), t[10].toFixed(1), `(${t[3].toFixed(1)}..${t[17].toFixed(1)})`);
  }
  console.log((await ex(['/bin/bash', '-c', 'LD_DEBUG=statistics /bin/bash -c : 2>&1; LD_DEBUG=statistics /bin/dash -c : 2>&1; ls -la /bin/sh; for i in 1 2 3; do /usr/bin/time -f "%e %U %S" /bin/bash -c : ; done 2>&1'])).stdout);
  for (let round = 0; round < 2; round++) {
    await time('true', ['/bin/true']);
    await time('dash -c :', ['/bin/dash', '-c', ':']);
    await time('bash -c :', ['/bin/bash', '-c', ':']);
    await time('bash --norc --noprofile -c :', ['/bin/bash', '--norc', '--noprofile', '-c', ':']);
    await time('bash -l -c echo', ['/bin/bash', '-l', '-c', 'echo hello']);
    await time('agentvm-echo', ['/usr/local/bin/agentvm-echo', 'x']);
  }
} finally { await close(); }
