import type * as acp from '@agentclientprotocol/sdk';
import type { PermissionMode } from './options.ts';

/** sessiond's answer to a permission request, by the attempt's permission mode (see options.ts). */
export function answerPermission(
  params: acp.RequestPermissionRequest,
  mode: PermissionMode,
): acp.RequestPermissionResponse {
  const kinds: acp.PermissionOptionKind[] = mode === 'allow' ? ['allow_once'] : ['reject_once', 'reject_always'];
  for (const kind of kinds) {
    const option = params.options.find((o) => o.kind === kind);
    if (option !== undefined) return { outcome: { outcome: 'selected', optionId: option.optionId } };
  }
  if (mode === 'allow') return answerPermission(params, 'reject');
  return { outcome: { outcome: 'cancelled' } };
}
