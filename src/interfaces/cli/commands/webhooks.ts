import type { Command } from 'commander';

/** `sessiond webhooks list|dead|replay`: the events waiting for delivery, the dead letters, and sending them again. */
export function registerWebhooks(program: Command): void {
  const webhooks = program
    .command('webhooks')
    .description('Webhook delivery: events waiting per session, dead letters, replay (SESSIOND_WEBHOOKS)');
  webhooks
    .command('list')
    .description('Sessions with webhook events waiting for delivery, and when the next attempt is due')
    .option('--json', 'print the list as JSON')
    .action(async (flags: { json?: boolean }) => {
      await (await import('./webhooks-action.ts')).listAction(flags);
    });
  webhooks
    .command('dead')
    .description('Dead letters: events not delivered within webhookDelivery.maxAgeMs (oldest first)')
    .option('--since <seq|time>', 'only those from this dead-letter number, or dead since this time (ISO 8601)')
    .option('--json', 'print them as JSON (with their bodies)')
    .action(async (flags: { since?: string; json?: boolean }) => {
      await (await import('./webhooks-action.ts')).deadAction(flags);
    });
  webhooks
    .command('replay')
    .description('Send dead letters again (same webhook-id, retried from zero) from a dead-letter number or a time')
    .requiredOption('--since <seq|time>', 'a dead-letter number (as `dead` shows) or a time (ISO 8601)')
    .option('--json', 'print {"replayed"}')
    .action(async (flags: { since: string; json?: boolean }) => {
      await (await import('./webhooks-action.ts')).replayAction(flags);
    });
}
