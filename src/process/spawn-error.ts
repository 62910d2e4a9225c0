/** A startup failure, phrased to name the command (and the cwd when that is what failed). */
export function describeSpawnError(command: string, code: string | undefined, detail: string): string {
  const name = JSON.stringify(command);
  const where = command.includes('/') ? '' : ' in PATH';
  switch (code) {
    case 'ENOENT':
      return `command ${name} was not found${where} (ENOENT)`;
    case 'EACCES':
      return `command ${name} is not executable (EACCES)`;
    case 'ENOEXEC':
      return `command ${name} is not a valid executable (ENOEXEC)`;
    default:
      return `command ${name} could not be started: ${detail}${code === undefined ? '' : ` (${code})`}`;
  }
}

export function describeCwdError(command: string, cwd: string, code: string | undefined): string {
  return `command ${JSON.stringify(command)} could not be started: cwd ${JSON.stringify(cwd)} is not a directory${code === undefined ? '' : ` (${code})`}`;
}

export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
