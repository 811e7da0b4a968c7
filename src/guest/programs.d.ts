/** A guest program in its own file is imported as its text (the image build's esbuild loads it so). */
declare module '*.pl' {
  const text: string;
  export default text;
}
