// Defined with every other error of sessiond in src/errors.ts.
export { ConflictError, QuotaError } from '../../errors.ts';
