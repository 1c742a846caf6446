/**
 * The HTML report read back the way a browser reads it. parse5 is a WHATWG-conformant parser
 * (jsdom's), so a check sees the tree the page builds rather than a pattern in its text, and a
 * page the parser has to repair (a stray end tag, an attribute twice) fails to load at all.
 */
import { parse, type DefaultTreeAdapterTypes } from 'parse5';

export type Element = DefaultTreeAdapterTypes.Element;
type Node = DefaultTreeAdapterTypes.Node;

/** The page's <html> element. */
export function parsePage(html: string): Element {
  const errors: string[] = [];
  const document = parse(html, {
    onParseError: (error) => errors.push(`${error.code} at line ${error.startLine}, column ${error.startCol}`),
  });
  if (errors.length > 0) throw new Error(`the page does not parse cleanly: ${errors.join('; ')}`);
  const root = document.childNodes.find(isElement);
  if (!root) throw new Error('the page has no root element');
  return root;
}

function isElement(node: Node): node is Element {
  return 'tagName' in node;
}

/** Every element under `root` (itself included) that `test` accepts, in document order. */
export function findAll(root: Element, test: (element: Element) => boolean): Element[] {
  const found: Element[] = [];
  const visit = (element: Element): void => {
    if (test(element)) found.push(element);
    for (const child of element.childNodes) if (isElement(child)) visit(child);
  };
  visit(root);
  return found;
}

export function attribute(element: Element, name: string): string | undefined {
  return element.attrs.find((attr) => attr.name === name)?.value;
}

/** Elements carrying attribute `name` (with `value`, when given). */
export function withAttribute(root: Element, name: string, value?: string): Element[] {
  return findAll(root, (element) => {
    const found = attribute(element, name);
    return found !== undefined && (value === undefined || found === value);
  });
}

export function byTag(root: Element, tagName: string): Element[] {
  return findAll(root, (element) => element.tagName === tagName);
}

/** The text a reader sees in `element`, whitespace runs collapsed, <title> tooltips left out. */
export function textOf(element: Element): string {
  const parts: string[] = [];
  const visit = (node: Node): void => {
    if (node.nodeName === '#text' && 'value' in node) parts.push(node.value);
    else if (isElement(node) && node.tagName !== 'title' && node.tagName !== 'desc') node.childNodes.forEach(visit);
  };
  visit(element);
  return parts.join('').replace(/\s+/g, ' ').trim();
}

/** The text of `element`'s own <title>: its tooltip and accessible name. */
export function tooltipOf(element: Element): string | undefined {
  const title = element.childNodes.find((child): child is Element => isElement(child) && child.tagName === 'title');
  return title?.childNodes.map((node) => ('value' in node ? node.value : '')).join('');
}

/** The chart whose <svg> holds the title with this id prefix ('chart-latency'). */
export function chart(root: Element, id: string): Element {
  const [svg] = byTag(root, 'svg').filter((element) => attribute(element, 'aria-labelledby')?.startsWith(`${id}-`));
  if (!svg) throw new Error(`no chart ${id}`);
  return svg;
}

/** The <figcaption> of the figure that holds `svg`. */
export function captionOf(svg: Element): string {
  const figure = svg.parentNode;
  if (!figure || !isElement(figure) || figure.tagName !== 'figure') throw new Error('the chart is not in a figure');
  const [caption] = byTag(figure, 'figcaption');
  if (!caption) throw new Error('the figure has no caption');
  return textOf(caption);
}
