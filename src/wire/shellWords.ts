/** A value as one word for a guest's sh (POSIX single quotes; a quote inside as `'\''`). */
export const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
