import type { Command } from 'commander';
import type { DeploymentPolicy } from '../../../policy/index.ts';
import { CliError } from '../cli-error.ts';
import { ExitCode } from '../exit-codes.ts';
import { formatHostPattern } from '../../../process/egress/host-pattern.ts';

export function registerPolicy(program: Command): void {
  const policy = program
    .command('policy')
    .description(
      "The deployment policy: what callers may choose (from the config file's `policy`, SESSIOND_POLICY, SESSIOND_WORKSPACE)",
    );
  policy
    .command('show')
    .description(
      'Print the deployment policy in force, every default filled in; exit 2 when it is invalid (the error names the field)',
    )
    .option('--json', 'print it as JSON')
    .action(async (flags: { json?: boolean }) => {
      // Split point: the configuration's schema loads when `policy show` runs, not for `--help`.
      const [{ loadConfig }, { deploymentPolicy }] = await Promise.all([
        import('../../../config/config.ts'),
        import('../../../runtime/deployment-policy.ts'),
      ]);
      let resolved: DeploymentPolicy;
      try {
        resolved = deploymentPolicy(loadConfig());
      } catch (error) {
        throw new CliError(`configuration: ${(error as Error).message}`);
      }
      process.stdout.write(flags.json === true ? `${JSON.stringify(resolved, null, 2)}\n` : describePolicy(resolved));
      process.exitCode = ExitCode.ok;
    });
}

function describePolicy(policy: DeploymentPolicy): string {
  const lines = [
    `agents callers may choose: ${policy.agents.join(', ')}`,
    `workspace (cwd when none is given): ${policy.workspace}`,
    `cwd must lie inside: ${policy.workspaceRoots.join(', ')}`,
    `agentDir: ${policy.agentDirRoots.length === 0 ? 'not settable by callers' : `inside ${policy.agentDirRoots.join(', ')}`}`,
    `idle timeout at most: ${policy.maxIdleTimeoutMs} ms`,
    `prompt at most: ${policy.maxPromptChars} characters`,
    `turn at most: ${policy.maxTurnMs === null ? 'no limit' : `${policy.maxTurnMs} ms`}`,
    `parked at a quota wall at most: ${policy.maxParkMs === null ? 'as each retry policy says' : `${policy.maxParkMs} ms`}; quota-wall attempts: ${policy.rateLimitAttempts === 'counted' ? 'always counted' : 'as each retry policy says'}`,
    `a prompt arriving while a turn runs may (whenBusy): ${policy.whenBusy?.join(', ') ?? 'enqueue, steer, interrupt, reject, rollback'}`,
    `approvals (permissionMode ask): denied after ${policy.approvals.deadlineMs} ms unanswered; allowed at once: ${policy.approvals.autoAllow.length === 0 ? 'nothing' : policy.approvals.autoAllow.map((r) => JSON.stringify(r)).join(', ')}`,
    `per-session webhooks may name: ${(policy.webhookHosts ?? []).length === 0 ? 'no host (callers may not name a webhook)' : (policy.webhookHosts ?? []).map(formatHostPattern).join(', ')}`,
  ];
  for (const [agent, p] of Object.entries(policy.permissions)) {
    const parts: string[] = [];
    if (p.ladder !== undefined)
      parts.push(`${p.ladder.option} up to "${p.ladder.ceiling}" (${p.ladder.steps.join(' < ')})`);
    for (const list of p.lists)
      parts.push(
        `${list.option}: ${list.allowed === '*' ? 'any' : list.allowed.length === 0 ? 'none' : list.allowed.join(', ')}`,
      );
    for (const sw of p.switches) parts.push(`${sw.option} ${sw.enabled ? 'on' : 'off'}`);
    lines.push(`${agent}: ${parts.length === 0 ? 'no permission knobs' : parts.join('; ')}`);
  }
  return `${lines.join('\n')}\n`;
}
