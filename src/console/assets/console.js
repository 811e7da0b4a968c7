// The console's few behaviours beyond htmx: copy buttons, and keeping a region still while the keyboard is in it.
'use strict';

document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (!button) return;
  const input = document.getElementById(button.getAttribute('data-copy'));
  if (!input) return;
  const done = () => {
    button.textContent = 'Copied';
    setTimeout(() => (button.textContent = 'Copy'), 2000);
  };
  if (navigator.clipboard) navigator.clipboard.writeText(input.value).then(done, () => input.select());
  else input.select();
});

document.addEventListener('focusin', (event) => {
  if (event.target instanceof HTMLInputElement && event.target.hasAttribute('data-select-on-focus')) event.target.select();
});

// A region that refreshes itself (a VM list, a VM's overview) waits while focus is inside it, so that a
// keyboard user's place is never swapped away under them.
document.addEventListener('htmx:beforeRequest', (event) => {
  const el = event.detail && event.detail.elt;
  const trigger = el && el.getAttribute('hx-trigger');
  if (trigger && trigger.startsWith('every ') && el.contains(document.activeElement)) event.preventDefault();
});

// A session that ended while a page polled: go and sign in again.
document.addEventListener('htmx:responseError', (event) => {
  const xhr = event.detail && event.detail.xhr;
  if (xhr && xhr.status === 401) window.location.assign('/console/login');
});

// Long work shows progress: the button that submitted a form spins until the next page arrives.
document.addEventListener('submit', (event) => {
  const button = event.submitter;
  if (button instanceof HTMLButtonElement) {
    button.classList.add('busy');
    button.setAttribute('aria-busy', 'true');
  }
});

// Back to a page from the browser's cache: nothing is in progress any more.
window.addEventListener('pageshow', () => {
  for (const b of document.querySelectorAll('.busy')) {
    b.classList.remove('busy');
    b.removeAttribute('aria-busy');
  }
});

// An upload streams: the chosen file goes as the request's body (the browser reads it from disk as it sends),
// so the server passes the bytes on to the VM as they come instead of reading a multipart body whole.
document.addEventListener('submit', (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute('data-stream-upload') || !window.fetch) return;
  const input = form.querySelector('input[type="file"]');
  const file = input && input.files && input.files[0];
  if (!file) return;
  event.preventDefault();
  const query = new URLSearchParams({ dir: form.elements.dir.value, name: form.elements.name.value.trim() });
  const token = form.elements._csrf.value;
  fetch(`${form.action}?${query}`, { method: 'POST', body: file, headers: { 'content-type': 'application/octet-stream', 'x-csrf-token': token } })
    .then(async (res) => {
      if (res.redirected && res.ok) return window.location.assign(res.url);
      // The server's page with the API's message: show its problem above the form.
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      const problem = doc.querySelector('.problem');
      for (const old of form.parentNode.querySelectorAll(':scope > .problem.upload-problem')) old.remove();
      if (problem) {
        problem.classList.add('upload-problem');
        form.before(document.importNode(problem, true));
      }
    })
    .catch(() => undefined)
    .finally(() => {
      for (const b of form.querySelectorAll('.busy')) {
        b.classList.remove('busy');
        b.removeAttribute('aria-busy');
      }
    });
});
