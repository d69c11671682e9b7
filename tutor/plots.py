"""Plot helpers used by the lessons: one function per figure, labelled axes and a title.

Each helper draws on a new figure (or the given ``ax``) and returns the matplotlib Figure.
"""
import matplotlib.pyplot as plt
