/** `keepIp`, `keep_ip` → `keep-ip`: a command's or an option's name. */
export const kebab = (name: string) =>
  name.replace(/_/g, '-').replace(/([a-z0-9])([A-Z])/g, '$1-$2').replace(/([A-Z]+)([A-Z][a-z])/g, '$1-$2').toLowerCase();

/** Sentence case to the help's lower case, leaving acronyms (`VM`) alone. */
export const lowerFirst = (s: string) => s.replace(/^[A-Z](?![A-Z])/, (c) => c.toLowerCase());
