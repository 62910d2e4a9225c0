/**
 * The `codex exec --json` items that stand for a tool call, read into what the shared ToolCalls
 * needs. Only `command_execution` was seen in the recordings (Codex's `exec_command` shell tool:
 * `{command, aggregated_output, exit_code, status}`); the others follow Codex's documented item shapes.
 * A command fails when its exit code is not 0 or its status is not `completed`.
 */
export interface ToolItem {
  name: string;
  arguments: unknown;
  /** Output so far (item.updated). */
  progress?: unknown;
  failed: boolean;
  result: unknown;
}

export function toolItem(type: string, item: Record<string, unknown>): ToolItem | null {
  const status = typeof item.status === 'string' ? item.status : '';
  switch (type) {
    case 'command_execution': {
      const exitCode = typeof item.exit_code === 'number' ? item.exit_code : null;
      const output = typeof item.aggregated_output === 'string' ? item.aggregated_output : '';
      return {
        name: 'command_execution',
        arguments: { command: item.command },
        ...(output === '' ? {} : { progress: { output } }),
        failed: exitCode !== 0 || (status !== '' && status !== 'completed'),
        result: { output, exitCode, ...(status === '' ? {} : { status }) },
      };
    }
    case 'file_change':
      return {
        name: 'file_change',
        arguments: { changes: item.changes },
        failed: status !== 'completed',
        result: { changes: item.changes, status },
      };
    case 'mcp_tool_call':
      return {
        name: 'mcp_tool_call',
        arguments: { server: item.server, tool: item.tool, arguments: item.arguments },
        failed: status === 'failed' || (item.error !== undefined && item.error !== null),
        result: item.error ?? item.result ?? null,
      };
    case 'web_search':
      return {
        name: 'web_search',
        arguments: { query: item.query },
        failed: status === 'failed',
        result: { query: item.query },
      };
    default:
      return null;
  }
}
