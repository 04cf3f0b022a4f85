/**
 * The derived-work process's entry where the front end gives none of its own
 * (derived-child.ts): the same work, traced by nothing.
 */
import { serveDerivedWork } from './derived-child.ts';

serveDerivedWork();
