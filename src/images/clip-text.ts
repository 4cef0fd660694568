/**
 * The text clean-up CLIP's tokenizer runs before splitting (docs/models.md, "Tokens"):
 * transformers' CLIPTokenizer passes prompts through ftfy.fix_text when ftfy is installed (as
 * OpenAI's tokenizer did when CLIP was trained), then collapses whitespace and lower-cases. This
 * is the deterministic part of ftfy's fixes that applies to prompts; its repair of mojibake
 * (text decoded with the wrong encoding) is not done.
 */

const QUOTES: Record<string, string> = { '\u2018': "'", '\u2019': "'", '\u201a': "'", '\u201b': "'", '\u201c': '"', '\u201d': '"', '\u201e': '"', '\u201f': '"' };
const LIGATURES: Record<string, string> = {
  '\ufb00': 'ff', '\ufb01': 'fi', '\ufb02': 'fl', '\ufb03': 'ffi', '\ufb04': 'ffl', '\ufb05': 'ſt', '\ufb06': 'st',
  '\u0132': 'IJ', '\u0133': 'ij', '\u01c7': 'LJ', '\u01c8': 'Lj', '\u01c9': 'lj', '\u01ca': 'NJ', '\u01cb': 'Nj', '\u01cc': 'nj',
};
const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };
// ftfy's remove_control_chars: C0 controls but tab, newline, form feed and CR; DEL; deprecated format characters; BOM; interlinear annotations.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000e-\u001f\u007f\u206a-\u206f\ufeff\ufff9-\ufffc]/g;

/** HTML character references (numeric, and the XML five plus nbsp), only when the text has no '<' (ftfy's "auto"). */
function unescapeHtml(text: string): string {
  if (text.includes('<')) return text;
  return text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, body: string) => {
    if (body[0] === '#') {
      const code = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : whole;
    }
    return NAMED[body.toLowerCase()] ?? whole;
  });
}

/**
 * A prompt as CLIP's tokenizer sees it before its split: ftfy's fixes (HTML references, curly
 * quotes, Latin ligatures, full- and half-width forms, control characters, line breaks, NFC),
 * whitespace collapsed and trimmed, lower case.
 *
 * @example cleanClipText('“Ｈｅｌｌｏ”  &amp; ﬁne') === '"hello" & fine'
 */
export function cleanClipText(text: string): string {
  let out = unescapeHtml(text);
  out = out.replace(/[\u2018-\u201f]/g, (c) => QUOTES[c] ?? c);
  out = out.replace(/[\ufb00-\ufb06\u0132\u0133\u01c7-\u01cc]/g, (c) => LIGATURES[c] ?? c);
  out = out.replace(/[\uff01-\uffee\u3000]/g, (c) => c.normalize('NFKC'));
  out = out.replace(CONTROL, '');
  out = out.replace(/\r\n|\r|\u2028|\u2029|\u0085/g, '\n').normalize('NFC');
  return out.replace(/\s+/g, ' ').trim().toLowerCase();
}
