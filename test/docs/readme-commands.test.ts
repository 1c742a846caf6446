import { test } from 'node:test';
import { runPage } from './run-page.js';

test('README.md: every shell block runs as written, or says why not', (t) => runPage(t, 'README.md'));
