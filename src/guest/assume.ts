/**
 * The assume program (assume.pl): what makes a booted guest a particular VM, started by the agent.
 * The image build bundles the agent with esbuild, which inlines the .pl file as its text.
 */
import program from './assume.pl';

export const ASSUME_PERL: string = program;
