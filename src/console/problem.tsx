import { ClientError } from './api.ts';

/** The API's message and hint at the top of a page, as the API said them. */
export function Problem({ problem }: { problem: ClientError }) {
  return (
    <div class="problem" role="alert">
      <p class="problem-message">
        <strong>{problem.message || 'Something went wrong on our side.'}</strong> <code class="problem-code">{problem.code}</code>
      </p>
      {problem.hint ? <p class="problem-hint">{problem.hint}</p> : null}
    </div>
  );
}

/** The API's refusal inside one section of a page (the rest of the page is fine). */
export function SectionProblem({ problem, fallback }: { problem: ClientError; fallback: string }) {
  return (
    <p class="section-problem" role="status">
      <strong>{problem.message || fallback}</strong> <code class="section-problem-code">{problem.code}</code>
      {problem.hint ? <span> {problem.hint}</span> : null}
    </p>
  );
}

/** Runs a change; on the API's refusal, answers `show(problem)` instead (the page again, with the API's words). */
export async function onRefusal(change: () => Promise<Response>, show: (problem: ClientError) => Response | Promise<Response>): Promise<Response> {
  try {
    return await change();
  } catch (err) {
    if (!(err instanceof ClientError)) throw err;
    return show(err);
  }
}
