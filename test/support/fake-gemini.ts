/** The fake Gemini lives beside the demo that ships it (local/fake-gemini.ts); tests take it from here. */
export * from '../../local/fake-gemini.ts';
