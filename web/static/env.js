// The environment a page shows (issue #31): the server renders it into
// <body data-env-query>, "" for production, and every script keeps it in
// the URLs of the requests it makes and the pages it opens, so that what
// a page changes is the environment it shows.
'use strict';

// rolloutEnv returns the dashboard's or the API's path (which may have a
// query and a fragment) in the page's environment.
window.rolloutEnv = function rolloutEnv(path) {
  const q = document.body.dataset.envQuery;
  if (!q) return path;
  const hash = path.indexOf('#');
  const frag = hash >= 0 ? path.slice(hash) : '';
  const p = hash >= 0 ? path.slice(0, hash) : path;
  return p + (p.includes('?') ? '&' : '?') + q + frag;
};
