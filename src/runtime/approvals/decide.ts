import type { ApprovalOption } from '../../protocol/index.ts';

export type ApprovalVerdict = 'allow' | 'deny';

/** `t<turn>-<12 hex>-<n>` (see gate.ts). */
export const REQUEST_ID_PATTERN = /^t\d{1,9}-[0-9a-f]{12}-\d{1,4}$/;

const KINDS: Record<ApprovalVerdict, string[]> = {
  allow: ['allow_once', 'allow_always'],
  deny: ['reject_once', 'reject_always'],
};

/**
 * The option an operator's verdict gives the agent: `option` names one the agent offered (by its
 * id or its kind, e.g. `allow_once`) and must fit the verdict; without it, the `_once` kind, else
 * the `_always` one. A denial without any reject option is answered `cancelled` (`optionId` null).
 * Contract: pure.
 */
export function chooseOption(
  options: readonly ApprovalOption[],
  verdict: ApprovalVerdict,
  option?: string,
): { ok: true; optionId: string | null } | { ok: false; message: string } {
  const fitting = options.filter((o) => KINDS[verdict].includes(o.kind));
  if (option !== undefined) {
    const found = fitting.find((o) => o.optionId === option) ?? fitting.find((o) => o.kind === option);
    if (found !== undefined) return { ok: true, optionId: found.optionId };
    const offered = fitting.map((o) => `${o.optionId} (${o.kind})`).join(', ');
    return {
      ok: false,
      message: `"${option}" is not an option the agent offered to ${verdict} this request (offered: ${offered === '' ? 'none' : offered})`,
    };
  }
  for (const kind of KINDS[verdict]) {
    const found = fitting.find((o) => o.kind === kind);
    if (found !== undefined) return { ok: true, optionId: found.optionId };
  }
  if (verdict === 'deny') return { ok: true, optionId: null };
  return { ok: false, message: 'the agent offered no option that allows this request' };
}
