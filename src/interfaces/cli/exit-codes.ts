/** The CLI's exit codes, documented in `--help` and the README. */
export const ExitCode = {
  ok: 0,
  /** The turn or attempt failed (category and reason on stderr). */
  failed: 1,
  /** Bad arguments or unreadable input. */
  usage: 2,
  /** Unknown session id. */
  notFound: 3,
  /** Cancelled with Ctrl+C, after the agent's whole process tree is gone. */
  interrupted: 130,
} as const;

export const EXIT_CODES_HELP = `
Exit codes:
  0    success (for normalize: the input was read, whatever the run's outcome)
  1    the attempt or turn failed (category and reason on stderr); a request the
       session's state or a quota refuses (delete without --force, import over an id)
  2    bad arguments or unreadable input (an archive import refuses)
  3    unknown session id
  130  cancelled with Ctrl+C, after the agent's whole process tree is gone
`;
