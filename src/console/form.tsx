import type { Child } from 'hono/jsx';
import type { ConsoleSession } from '../domain/sessions.ts';
import { Csrf } from './layout.tsx';

/** A form that changes something: POSTed, with the session's CSRF token and any hidden fields. */
export function PostForm(props: {
  session: ConsoleSession;
  action: string;
  class?: string;
  id?: string;
  target?: string;
  enctype?: string;
  hidden?: Record<string, string>;
  children?: Child;
  [data: `data-${string}`]: string;
}) {
  const { session, action, hidden, children, ...attrs } = props;
  return (
    <form method="post" action={action} {...(attrs as Record<string, string>)}>
      <Csrf session={session} />
      {Object.entries(hidden ?? {}).map(([name, value]) => (
        <input type="hidden" name={name} value={value} />
      ))}
      {children}
    </form>
  );
}

/** A labelled control, with words that help below it when there are some. */
export function Field(props: { id: string; label: Child; class?: string; children: Child }) {
  return (
    <div class={props.class ? `field ${props.class}` : 'field'}>
      <label for={props.id}>{props.label}</label>
      {props.children}
    </div>
  );
}

/** A choice of a few values, one of them selected. */
export function Select(props: { id: string; name: string; options: Array<[value: string, label: string]>; selected?: string }) {
  return (
    <select id={props.id} name={props.name}>
      {props.options.map(([value, label]) => (
        <option value={value} selected={value === props.selected}>
          {label}
        </option>
      ))}
    </select>
  );
}

/** A form's button; `variant` is primary, danger or ghost (console.css). */
export function Submit(props: { label: Child; variant?: string; ariaLabel?: string; small?: boolean }) {
  const cls = ['button', props.small ? 'small' : '', props.variant ?? ''].filter(Boolean).join(' ');
  return (
    <button type="submit" class={cls} aria-label={props.ariaLabel}>
      {props.label}
    </button>
  );
}

/** A page that asks before something is destroyed: what will go, a button that does it, a way back. */
export function ConfirmForm(props: { session: ConsoleSession; action: string; label: string; keep: string; children: Child }) {
  return (
    <PostForm session={props.session} action={props.action} class="card narrow stack danger-zone">
      {props.children}
      <div class="button-row">
        <Submit label={props.label} variant="danger" />
        <a class="button ghost" href={props.keep}>
          Keep it
        </a>
      </div>
    </PostForm>
  );
}
